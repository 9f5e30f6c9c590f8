/* A Talos plugin's configuration for a run or a poll (gateway/
 * plugin_state.h): its settings, its Node path, its OAuth tokens and
 * where renewed ones are sealed, its secrets, read from the state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "gateway/plugin_state.h"
#include "runtime/talos.h"

/* Renewed OAuth tokens (talos_oauth.store), sealed in the state where the
 * refresh token is: the user's row when there is one, else the system's. */
static void oauth_store(void *arg, const char *access, const char *refresh, const char *expiry)
{
  struct gw_talos_config *cfg = arg;
  struct cap_error err = {0};
  char *mine = NULL;
  bool user_row = false;
  gw_cred_get(cfg->st, cfg->cap, "refresh_token", CAP_SCOPE_USER, cfg->user, &mine, &user_row,
              &err);
  gw_secret_free(mine);
  cap_error_clear(&err);
  enum cap_secret_scope scope = user_row ? CAP_SCOPE_USER : CAP_SCOPE_SYSTEM;
  const char *u = user_row ? cfg->user : NULL;
  const char *const pairs[][2] = {
      {"access_token", access}, {"refresh_token", refresh}, {"token_expiry", expiry}};
  for (size_t i = 0; i < ARRAY_SIZE(pairs); i++)
    if (pairs[i][1] && gw_cred_set(cfg->st, cfg->cap, pairs[i][0], scope, u, pairs[i][1],
                                   strlen(pairs[i][1]), &err) < 0)
      cap_error_clear(&err); /* the next call refreshes again */
}

static int oauth_load(struct gw_state *st, const struct cap_spec *spec, const char *user,
                      struct gw_talos_config *cfg, struct cap_error *err)
{
  int r = gw_setting_get(st, spec->id, user, GW_SETTING_OAUTH_TOKEN_URL, &cfg->token_url, err);
  for (size_t i = 0; r == 0 && i < TALOS_OAUTH_N; i++) {
    bool found = false;
    r = gw_cred_lookup(st, spec->id, talos_oauth_names[i], user, &cfg->oauth.values[i], &found,
                       err);
  }
  cfg->oauth.token_url = cfg->token_url;
  cfg->oauth.store = oauth_store;
  cfg->oauth.store_arg = cfg;
  cfg->st = st;
  cfg->cap = spec->id;
  cfg->user = user;
  cfg->in.oauth = &cfg->oauth;
  return r;
}

int gw_talos_config_load(struct gw_state *st, const struct cap_spec *spec, const char *user,
                         char *const *secrets, struct gw_talos_config *cfg, struct cap_error *err)
{
  *cfg = (struct gw_talos_config){0};
  cfg->settings = cap_xcalloc(spec->n_settings + 1, sizeof *cfg->settings);
  int r = 0;
  for (size_t i = 0; r == 0 && i < spec->n_settings; i++)
    r = gw_setting_get(st, spec->id, user, spec->settings[i].name, &cfg->settings[i], err);
  if (r == 0)
    r = gw_setting_get(st, spec->id, user, GW_SETTING_NODE_PATH, &cfg->node_path, err);
  cfg->in = (struct talos_input){
      .secrets = secrets, .settings = cfg->settings, .node_path = cfg->node_path};
  if (r == 0 && spec->talos.has_oauth && secrets) /* a run, not a readiness probe */
    r = oauth_load(st, spec, user, cfg, err);
  if (r < 0)
    gw_talos_config_free(cfg, spec);
  return r;
}

int gw_talos_secrets_load(struct gw_state *st, const struct cap_spec *spec, const char *user,
                          char ***out, struct cap_error *err)
{
  char **v = cap_xcalloc(spec->n_secrets + 1, sizeof *v);
  int r = 0;
  for (size_t i = 0; r == 0 && i < spec->n_secrets; i++) {
    bool found = false;
    r = gw_cred_lookup(st, spec->id, spec->secrets[i].name, user, &v[i], &found, err);
    if (r == 0 && !found && spec->secrets[i].required) {
      _cleanup_free_ char *qid = cap_shell_quote(spec->id);
      _cleanup_free_ char *qname = cap_shell_quote(spec->secrets[i].name);
      _cleanup_free_ char *quser = cap_shell_quote(user);
      r = cap_error_set(err, ENOENT,
                        "credential %s is not set for user %s; set it with `capsule cred set %s "
                        "%s --scope user --user %s` (the value on stdin)",
                        spec->secrets[i].name, user, qid, qname, quser);
    }
  }
  if (r < 0) {
    gw_talos_secrets_free(v, spec);
    v = NULL;
  }
  *out = v;
  return r;
}

void gw_talos_secrets_free(char **secrets, const struct cap_spec *spec)
{
  for (size_t i = 0; secrets && i < spec->n_secrets; i++)
    gw_secret_free(secrets[i]);
  free(secrets);
}

void gw_talos_config_free(struct gw_talos_config *cfg, const struct cap_spec *spec)
{
  for (size_t i = 0; cfg->settings && i < spec->n_settings; i++)
    free(cfg->settings[i]);
  free(cfg->settings);
  free(cfg->node_path);
  free(cfg->token_url);
  for (size_t i = 0; i < TALOS_OAUTH_N; i++)
    gw_secret_free(cfg->oauth.values[i]);
  *cfg = (struct gw_talos_config){0};
}
