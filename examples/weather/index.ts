// A Talos plugin in the shape Talos's loader expects: `handlers` called as
// handler(args, config), config one flat object of strings (the settings
// and credentials); `triggers` polled as poll(config, state, settings).
// capsule loads this TypeScript as it is (esbuild, cached). The API is not
// called: grant its host first (`capsule grant weather --host
// api.openweathermap.org:443`), then fetch() goes through capsule's proxy.
type Config = Record<string, string>;

interface CityArgs {
  city: string;
  days?: number;
}

async function current({ city }: CityArgs, config: Config) {
  return { city, units: config.units, note: "connect the API with the api_key credential" };
}

async function forecast({ city, days = 3 }: CityArgs, config: Config) {
  return { city, days, units: config.units };
}

export const handlers = { current, forecast };

export const triggers = {
  severe_alert: {
    // no API call here: the state counts the polls, and no alert fires
    async poll(_config: Config, state: { polls?: number }, _settings: Config) {
      return { event: null, newState: { polls: (state.polls ?? 0) + 1 } };
    },
  },
};
