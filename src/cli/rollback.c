/* capsule rollback list|show|diff|restore|verify|prune: the snapshots
 * `capsule run` takes of a manifest's writable grants when its
 * rollback.enabled is true (sandbox/rollback.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "core/cleanup.h"
#include "core/escape.h"
#include "core/json.h"
#include "gateway/state.h"
#include "sandbox/rollback.h"

#define PRUNE_KEEP 10

static const char rollback_help[] =
    "usage: capsule rollback list [--json] | show ID | diff ID | restore ID | verify ID |\n"
    "                        prune [--keep N]   [--state DIR]\n"
    "\n"
    "The snapshots `capsule run` takes of the writable grants, before and after\n"
    "the command, when the manifest's rollback.enabled is true.\n"
    "\n"
    "  list         the runs, newest last (id, time, paths, command)\n"
    "  show ID      one run: its paths, excludes, and each snapshot's Merkle root\n"
    "               and number of entries\n"
    "  diff ID      what the run changed: + added, - removed, M modified, P mode\n"
    "  restore ID   put the paths back as they were before the run (each file\n"
    "               written beside it and renamed over; modes, symlinks and\n"
    "               deletions restored; what the run created removed); refused\n"
    "               when an object is missing or corrupted\n"
    "  verify ID    rehash the objects the run needs; names each damaged one\n"
    "  prune        keep the newest --keep N runs (default 10), drop the other\n"
    "               runs and every object no kept run needs\n"
    "      --json        list: an array of objects (id, time, paths, command)\n"
    "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"
    "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"
    "  -h, --help        this text\n";

struct rb_args {
  const char *state, *sub, *id;
  bool json;
  long keep;
};

static int rb_parse(int argc, char **argv, struct rb_args *a)
{
  enum { OPT_STATE = 256, OPT_JSON, OPT_KEEP };
  static const struct option options[] = {{"state", required_argument, NULL, OPT_STATE},
                                          {"json", no_argument, NULL, OPT_JSON},
                                          {"keep", required_argument, NULL, OPT_KEEP},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  *a = (struct rb_args){.keep = PRUNE_KEEP};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    char *end;
    switch (c) {
    case OPT_STATE: a->state = optarg; break;
    case OPT_JSON: a->json = true; break;
    case OPT_KEEP:
      a->keep = strtol(optarg, &end, 10);
      if (*end || a->keep < 0 || a->keep > 100000)
        return cli_usage_error("rollback", "--keep '%s': a number of runs, 0..100000", optarg);
      break;
    case 'h': fputs(rollback_help, stdout); return -1;
    default: return cli_option_error("rollback", argv, "h");
    }
  }
  a->state = cli_default(a->state, "CAPSULE_STATE");
  static const char *const subs[] = {"list", "show", "diff", "restore", "verify", "prune"};
  if (optind >= argc)
    return cli_usage_error("rollback", "name what to do: list, show, diff, restore, verify, prune");
  a->sub = argv[optind++];
  bool known = false;
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    known = known || strcmp(a->sub, subs[i]) == 0;
  if (!known)
    return cli_usage_error("rollback", "unknown '%s': list, show, diff, restore, verify or prune",
                           a->sub);
  bool wants_id = strcmp(a->sub, "list") != 0 && strcmp(a->sub, "prune") != 0;
  if (wants_id && optind >= argc)
    return cli_usage_error("rollback", "%s needs a rollback ID (capsule rollback list)", a->sub);
  a->id = wants_id ? argv[optind++] : NULL;
  if (optind < argc)
    return cli_usage_error("rollback", "unexpected '%s'", argv[optind]);
  if (a->json && strcmp(a->sub, "list") != 0)
    return cli_usage_error("rollback", "--json goes with list");
  return 0;
}

static void print_escaped(const char *s) { cap_escape_fput(stdout, s, 4096); }

/* The library's message on stderr; the exit status for it. */
static int rb_fail(struct cap_error *err)
{
  fputs("capsule rollback: ", stderr);
  cap_escape_fput(stderr, err->message ? err->message : "failed", 4096);
  fputs("\n", stderr);
  int status = cli_exit_for(-EINVAL, err);
  cap_error_clear(err);
  return status;
}

static int rb_list(const char *store, bool json)
{
  struct cap_strv ids = {0};
  struct cap_error err = {0};
  if (rb_record_ids(store, &ids, &err) < 0)
    return rb_fail(&err);
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, true);
  cap_jw_begin_array(&w);
  int status = CLI_EXIT_OK;
  for (size_t i = 0; i < ids.len; i++) {
    struct rb_record rec;
    if (rb_record_load(store, ids.v[i], &rec, &err) < 0) {
      status = rb_fail(&err);
      continue;
    }
    if (json) {
      cap_jw_begin_object(&w);
      cap_jw_key(&w, "id");
      cap_jw_string(&w, rec.id);
      cap_jw_key(&w, "time");
      cap_jw_string(&w, rec.time);
      const struct cap_strv *lists[] = {&rec.paths, &rec.command};
      const char *keys[] = {"paths", "command"};
      for (size_t k = 0; k < 2; k++) {
        cap_jw_key(&w, keys[k]);
        cap_jw_begin_array(&w);
        for (size_t j = 0; j < lists[k]->len; j++)
          cap_jw_string(&w, lists[k]->v[j]);
        cap_jw_end_array(&w);
      }
      cap_jw_end_object(&w);
    } else {
      printf("%-24s %-21s ", rec.id, rec.time);
      for (size_t j = 0; j < rec.paths.len; j++) {
        print_escaped(rec.paths.v[j]);
        fputs(j + 1 < rec.paths.len ? "," : "", stdout);
      }
      fputs("  ", stdout);
      for (size_t j = 0; j < rec.command.len; j++) {
        print_escaped(rec.command.v[j]);
        fputs(j + 1 < rec.command.len ? " " : "", stdout);
      }
      fputs("\n", stdout);
    }
    rb_record_free(&rec);
  }
  cap_jw_end_array(&w);
  if (json)
    printf("%s\n", out.data);
  free(out.data);
  cap_strv_free(&ids);
  return status;
}

static void print_diff(const struct rb_record *rec)
{
  size_t changes = 0;
  for (size_t i = 0; i < rec->after.len; i++) {
    const struct rb_entry *a = &rec->after.v[i];
    const struct rb_entry *b = rb_tree_find(&rec->before, a->path);
    const char *tag = !b                                                   ? "+"
                      : b->type != a->type                                 ? "M"
                      : a->type != RB_DIR && strcmp(a->hash, b->hash) != 0 ? "M"
                      : a->mode != b->mode                                 ? "P"
                                                                           : NULL;
    if (!tag)
      continue;
    printf("%s ", tag);
    print_escaped(a->path);
    fputs("\n", stdout);
    changes++;
  }
  for (size_t i = 0; i < rec->before.len; i++)
    if (!rb_tree_find(&rec->after, rec->before.v[i].path)) {
      fputs("- ", stdout);
      print_escaped(rec->before.v[i].path);
      fputs("\n", stdout);
      changes++;
    }
  if (!changes)
    printf("no changes (both snapshots have the Merkle root %s)\n", rec->before.root);
}

static void print_show(const struct rb_record *rec)
{
  printf("id:        %s\ntime:      %s\ncommand:  ", rec->id, rec->time);
  for (size_t j = 0; j < rec->command.len; j++) {
    fputs(" ", stdout);
    print_escaped(rec->command.v[j]);
  }
  fputs("\n", stdout);
  for (size_t j = 0; j < rec->paths.len; j++) {
    fputs("path:      ", stdout);
    print_escaped(rec->paths.v[j]);
    fputs("\n", stdout);
  }
  const struct cap_strv *ex[] = {&rec->patterns, &rec->globs};
  const char *names[] = {"excludes: ", "globs:    "};
  for (size_t k = 0; k < 2; k++)
    for (size_t j = 0; j < ex[k]->len; j++) {
      printf("%s ", names[k]);
      print_escaped(ex[k]->v[j]);
      fputs("\n", stdout);
    }
  printf("before:    root %s, %zu entries%s\n", rec->before.root, rec->before.len,
         rec->before.unstable.len ? ", some changed while read" : "");
  if (rec->has_after)
    printf("after:     root %s, %zu entries\n", rec->after.root, rec->after.len);
  for (size_t j = 0; j < rec->before.unstable.len; j++) {
    fputs("unstable:  ", stdout);
    print_escaped(rec->before.unstable.v[j]);
    fputs(" (changed while it was read; its snapshot is what was read last)\n", stdout);
  }
}

static int rb_one(const char *store, const struct rb_args *a)
{
  struct rb_record rec;
  struct cap_error err = {0};
  if (rb_record_load(store, a->id, &rec, &err) < 0)
    return rb_fail(&err);
  int status = CLI_EXIT_OK;
  if (strcmp(a->sub, "show") == 0) {
    print_show(&rec);
  } else if (strcmp(a->sub, "diff") == 0) {
    if (rec.has_after)
      print_diff(&rec);
    else
      printf("the run has no after snapshot (capsule stopped before it)\n");
  } else if (strcmp(a->sub, "verify") == 0) {
    struct cap_strv bad = {0};
    if (rb_verify(store, &rec, &bad, &err) < 0)
      status = rb_fail(&err);
    for (size_t i = 0; i < bad.len; i++) {
      fputs("capsule rollback: ", stderr);
      cap_escape_fput(stderr, bad.v[i], 4096);
      fputs("\n", stderr);
    }
    if (status == CLI_EXIT_OK && bad.len)
      status = CLI_EXIT_INVALID;
    else if (status == CLI_EXIT_OK)
      printf("%s: every object is sound (Merkle root %s)\n", rec.id, rec.before.root);
    cap_strv_free(&bad);
  } else {
    struct rb_restore_stats st;
    if (rb_restore(store, &rec, &st, &err) < 0)
      status = rb_fail(&err);
    else
      printf("restored %s: %zu files or links written, %zu removed, %zu directories made, %zu "
             "modes set\n",
             rec.id, st.written, st.removed, st.dirs, st.modes);
  }
  rb_record_free(&rec);
  return status;
}

int cmd_rollback(int argc, char **argv)
{
  struct rb_args a;
  int r = rb_parse(argc, argv, &a);
  if (r)
    return r < 0 ? CLI_EXIT_OK : r;
  _cleanup_free_ char *dflt = a.state ? NULL : gw_state_default_dir();
  _cleanup_free_ char *store = rb_store_dir(a.state ? a.state : dflt);
  if (strcmp(a.sub, "list") == 0)
    return rb_list(store, a.json);
  if (strcmp(a.sub, "prune") == 0) {
    size_t records, objects;
    struct cap_error err = {0};
    if (rb_prune(store, (size_t)a.keep, &records, &objects, &err) < 0)
      return rb_fail(&err);
    printf("pruned %zu runs and %zu objects\n", records, objects);
    return CLI_EXIT_OK;
  }
  return rb_one(store, &a);
}

/* ---- capsule run's side ---------------------------------------------------- */

int run_rollback_before(const struct cap_spec *spec, const char *state, struct rb_record *rec,
                        char **ret_store, char *const *command)
{
  *rec = (struct rb_record){0};
  *ret_store = NULL;
  if (!spec->rollback.enabled)
    return 0;
  for (size_t i = 0; i < spec->n_grants; i++) {
    const struct cap_fs_grant *g = &spec->grants[i];
    if (g->access == CAP_ACCESS_READ || g->origin == CAP_ORIGIN_SYSTEM)
      continue;
    _cleanup_free_ char *p = run_expand_home(g->path);
    if (p[0] == '/' && !cap_strv_contains(&rec->paths, p))
      cap_strv_push(&rec->paths, p);
  }
  for (size_t i = 0; i < spec->rollback.exclude_patterns.len; i++)
    cap_strv_push(&rec->patterns, spec->rollback.exclude_patterns.v[i]);
  for (size_t i = 0; i < spec->rollback.exclude_globs.len; i++)
    cap_strv_push(&rec->globs, spec->rollback.exclude_globs.v[i]);
  for (size_t i = 0; command[i]; i++)
    cap_strv_push(&rec->command, command[i]);
  _cleanup_free_ char *dflt = state ? NULL : gw_state_default_dir();
  char *store = rb_store_dir(state ? state : dflt);
  struct cap_error err = {0};
  if (rb_snapshot(store, &rec->paths, &rec->patterns, &rec->globs, true, &rec->before, &err) < 0) {
    fputs("capsule run: rollback.enabled, but the snapshot before the run failed: ", stderr);
    cap_escape_fput(stderr, err.message ? err.message : "", 4096);
    fputs("; nothing was run\n", stderr);
    cap_error_clear(&err);
    free(store);
    rb_record_free(rec);
    return CLI_EXIT_INVALID;
  }
  *ret_store = store;
  return 0;
}

void run_rollback_after(struct rb_record *rec, char *store)
{
  if (!store)
    return;
  struct cap_error err = {0};
  rec->has_after =
      rb_snapshot(store, &rec->paths, &rec->patterns, &rec->globs, false, &rec->after, &err) == 0;
  if (!rec->has_after) {
    fputs("capsule run: rollback: the snapshot after the run failed: ", stderr);
    cap_escape_fput(stderr, err.message ? err.message : "", 4096);
    fputs("\n", stderr);
    cap_error_clear(&err);
  }
  if (rb_record_save(store, rec, &err) < 0) {
    fputs("capsule run: rollback: ", stderr);
    cap_escape_fput(stderr, err.message ? err.message : "", 4096);
    fputs("\n", stderr);
    cap_error_clear(&err);
  } else {
    fprintf(stderr, "capsule run: rollback %s (capsule rollback diff %s; restore %s)\n", rec->id,
            rec->id, rec->id);
  }
  rb_record_free(rec);
  free(store);
}
