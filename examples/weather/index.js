// Talos handler module: one export per function in manifest.json.
export async function current({ city }, { credentials, settings }) {
  return { city, units: settings.units, note: 'connect the API with credentials.api_key' };
}

export async function forecast({ city, days = 3 }, { settings }) {
  return { city, days, units: settings.units };
}
