/* The gateway verbs' own help texts (list, call, policy, cred, approvals, approve,
 * deny, audit): `capsule VERB --help` and `capsule help VERB` print one. A
 * verb that gains an option documents it here and in docs/cli.md. */
#include <stddef.h>
#include <string.h>

#include "cli/cli.h"

#define GATEWAY_COMMON                                                                             \
  "      --state DIR   capsule's state (default $CAPSULE_STATE, else\n"                            \
  "                    $XDG_STATE_HOME/capsule or ~/.local/state/capsule)\n"                       \
  "  -h, --help        this text\n"                                                                \
  "Options may come before or after the arguments.\n"

static const struct {
  const char *verb;
  const char *text;
} gateway_help[] = {
    {"config", "usage: capsule config set CAPABILITY NAME VALUE [--user U]\n"
               "       capsule config list CAPABILITY [--user U] [--json]\n"
               "       capsule config rm CAPABILITY NAME [--user U]\n"
               "\n"
               "A capability's settings (Talos `settings`), stored in the state and given to\n"
               "its handlers as text; VALUE is checked against the setting's type and, for a\n"
               "select, its options. node_path names a directory whose node_modules the\n"
               "plugin's imports fall back to. list also shows the credentials: the value of\n"
               "one declared `secret: false`, of a secret one only whether it is set.\n"
               "\n"
               "      --caps DIR    the capabilities directory\n"
               "      --user U      a user's own value (default: the operator's, for everyone)\n"
               "      --json        list: an array of objects\n" GATEWAY_COMMON "\n"
               "exit status: 0 ok, 1 invalid (an unknown setting, a value that does not fit)\n"},
    {"triggers",
     "usage: capsule triggers poll CAPABILITY TRIGGER [--user U] [--timeout S]\n"
     "       capsule triggers enable|disable CAPABILITY TRIGGER\n"
     "       capsule triggers on CAPABILITY TRIGGER --call CAPABILITY TOOL\n"
     "       capsule triggers run [--caps DIR] [--user U]\n"
     "\n"
     "poll runs one poll of a Talos trigger in its sandbox with the stored config\n"
     "and the trigger's persisted state, stores the new state with the event and\n"
     "prints the event as one JSON line (nothing when there is none). run polls\n"
     "every enabled trigger at its interval (the first setting named\n"
     "*poll_interval*, in minutes; else 5), the first poll after 5 s, until\n"
     "SIGTERM. on calls TOOL with {\"event\": EVENT} on each event.\n"
     "\n"
     "      --caps DIR    the capabilities directory\n"
     "      --user U      whose settings, credentials and state (default the login name)\n"
     "      --timeout S   a poll's wall-clock limit in seconds\n" GATEWAY_COMMON "\n"
     "exit status: 0 ok, 1 the poll failed (nothing stored) or invalid input\n"},
    {"events",
     "usage: capsule events [--follow] [--json]\n"
     "\n"
     "The events triggers fired, oldest first; --follow waits for more (with\n"
     "--json, one object a line).\n"
     "\n"
     "      --follow      keep printing new events until SIGTERM or SIGINT\n"
     "      --json        an array of objects (JSON lines with --follow)\n" GATEWAY_COMMON},
    {"grant", "usage: capsule grant CAPABILITY --host H[:P] | --read P | --write P | --rw P ...\n"
              "       capsule grant list [CAPABILITY] [--json]\n"
              "\n"
              "Rights for a capability without editing its manifest, stored in the state,\n"
              "added to its sandbox at each call and audited: a host joins its egress\n"
              "allowlist (a capability without network gets the proxy with only its\n"
              "granted hosts), a path is bound read-only, write-only or read-write.\n"
              "\n"
              "      --json        list: an array of objects\n" GATEWAY_COMMON "\n"
              "exit status: 0 ok, 1 invalid input\n"},
    {"revoke", "usage: capsule revoke CAPABILITY --host H[:P] | --read P | --write P | --rw P ...\n"
               "\n"
               "Removes grants `capsule grant` stored (the same flags and values).\n"
               "\n" GATEWAY_COMMON "\n"
               "exit status: 0 ok, 1 no such grant or invalid input\n"},
    {"plugin", "usage: capsule plugin install DIR\n"
               "\n"
               "Installs a Talos plugin's own node_modules: `npm ci` in DIR (which must hold\n"
               "package.json and package-lock.json), with install scripts not run.\n"
               "\n"
               "  -h, --help        this text\n"
               "\n"
               "exit status: 0 ok, 1 no package.json or lock file, or npm failed\n"},
    {"list", "usage: capsule list [--caps DIR] [--state DIR] [--user U] [--json]\n"
             "\n"
             "The capabilities under DIR, their tools, each tool's effective policy and\n"
             "where it comes from, and whether the capability is ready to call.\n"
             "\n"
             "      --caps DIR    the capabilities directory (default $CAPSULE_CAPS, else\n"
             "                    ./capabilities)\n"
             "      --user U      whose overrides apply (default the login name)\n"
             "      --json        an array of objects instead of text\n" GATEWAY_COMMON "\n"
             "exit status: 0 ok, 1 a capability did not load\n"},
    {"call",
     "usage: capsule call [--caps DIR] [--state DIR] [--user U] [--timeout S]\n"
     "                    [--session ID] [--approval-ttl S] [--json] CAPABILITY TOOL [JSON|-]\n"
     "\n"
     "One tool call through policy, approval, argument validation, credentials,\n"
     "the sandboxed run and the audit log; prints the tool's JSON result.\n"
     "The arguments default to {}; - reads them from stdin.\n"
     "\n"
     "      --caps DIR    the capabilities directory (default $CAPSULE_CAPS, else\n"
     "                    ./capabilities)\n"
     "      --user U      who calls (default the login name)\n"
     "      --timeout S   wall-clock limit in seconds (1..31536000)\n"
     "      --session ID  the session id a Selu tool sees in its context\n"
     "      --approval-ttl S  how long an approval this call leaves stays valid\n"
     "                    (seconds, default 600)\n"
     "      --json        print {\"result\": ..., \"terminal_on_success\": bool}\n" GATEWAY_COMMON
     "\n"
     "exit status: 0 ok, 1 the call failed, 2 usage, 3 the host cannot run it,\n"
     "4 denied by policy or awaiting approval (`capsule approve ID`)\n"},
    {"policy", "usage: capsule policy set CAPABILITY TOOL allow|ask|block [--user U] [--caps DIR]\n"
               "                          [--force] [--state DIR]\n"
               "       capsule policy rm CAPABILITY TOOL [--user U] [--state DIR]\n"
               "       capsule policy list [--json] [--state DIR]\n"
               "\n"
               "Operator defaults (without --user) or one user's overrides of a tool's\n"
               "policy: allow runs it, ask waits for `capsule approve`, block refuses it.\n"
               "`set` checks that the capability and tool are in --caps (an error names\n"
               "the known ones); `set` and `rm` print what they did and are audited.\n"
               "\n"
               "      --user U      set or remove U's override instead of the operator default\n"
               "      --caps DIR    the capabilities `set` checks against (default\n"
               "                    ./capabilities, or CAPSULE_CAPS)\n"
               "      --force       set it even when DIR cannot be read or does not hold it\n"
               "      --json        list: an array of objects (capability, tool, policy, "
               "user)\n" GATEWAY_COMMON "\n"
               "exit status: 0 ok, 1 failed, unknown or not found, 2 usage\n"},
    {"cred", "usage: capsule cred set CAPABILITY NAME --scope system|user [--user U]\n"
             "       capsule cred set --shared NAME --scope system|user [--user U]\n"
             "       capsule cred list [CAPABILITY | --shared] [--scope S] [--user U] [--json]\n"
             "       capsule cred rm CAPABILITY NAME --scope system|user [--user U]\n"
             "       capsule cred rm --shared NAME --scope system|user [--user U]\n"
             "\n"
             "Credentials, sealed in the state database, each for one capability, or\n"
             "--shared by every capability that declares NAME. A call looks them up in\n"
             "this order: the capability's for the user, the capability's system one,\n"
             "the shared one for the user, the shared system one. `set` reads the value\n"
             "from stdin, or from the terminal with echo off; never from the command line.\n"
             "\n"
             "      --scope S     system (every user) or user (one user's)\n"
             "      --user U      the user of a user-scope credential (default the login\n"
             "                    name; another user's needs root or the state's owner)\n"
             "      --shared      one value for every capability declaring NAME\n"
             "      --json        list: an array of objects (capability, name, scope,\n"
             "                    user, updated)\n" GATEWAY_COMMON "\n"
             "exit status: 0 ok, 1 failed or not found, 2 usage, 4 --user not permitted\n"},
    {"approvals", "usage: capsule approvals [--json] [--state DIR]\n"
                  "\n"
                  "The pending approvals: id, capability, tool, user, who asked, until when,\n"
                  "and the arguments (control characters escaped). An approval lapses after\n"
                  "its time (call --approval-ttl, default 10 minutes) and is void when the\n"
                  "tool's code, grants or policy change.\n"
                  "\n"
                  "      --json        an array of objects (id, capability, tool, user,\n"
                  "                    asked_by, created, expires, arguments)\n" GATEWAY_COMMON "\n"
                  "exit status: 0 ok, 1 failed\n"},
    {"approve", "usage: capsule approve ID [--state DIR]\n"
                "\n"
                "Approves the pending call ID (8 hex digits) that `capsule call` reported,\n"
                "printing what it approves; repeating the call then runs it, once. Refused\n"
                "inside a capsule sandbox.\n"
                "\n" GATEWAY_COMMON "\n"
                "exit status: 0 approved, 1 no such pending approval, 2 usage\n"},
    {"deny", "usage: capsule deny ID [--state DIR]\n"
             "\n"
             "Denies the pending call ID that `capsule call` reported, printing what it\n"
             "denies; repeating the call then sees it refused. Refused inside a sandbox.\n"
             "\n" GATEWAY_COMMON "\n"
             "exit status: 0 denied, 1 no such pending approval, 2 usage\n"},
    {"audit", "usage: capsule audit [--json] [--since TIME] [--tail N] [--follow] [--state DIR]\n"
              "       capsule audit verify [--state DIR]\n"
              "\n"
              "The audit log: one record per call (an interrupted one too), and one per\n"
              "policy, credential or approval change (decision: the kind of change);\n"
              "`verify` checks the hash chain and its head and names the first bad record.\n"
              "\n"
              "      --json        an array of objects, one per record (with --follow:\n"
              "                    one object a line)\n"
              "      --since TIME  records from TIME on: RFC 3339 (2026-11-25T18:00:00Z,\n"
              "                    an offset, or a date) or back from now (30s, 10m, 2h, 1d)\n"
              "      --tail N      only the last N records (of those --since selects)\n"
              "      --follow      keep printing records as they are added; alone, it starts\n"
              "                    at the end (only new records)\n" GATEWAY_COMMON "\n"
              "exit status: 0 ok (verified), 1 failed or the chain is broken, 2 usage\n"},
};

const char *cli_gateway_help(const char *verb)
{
  for (size_t i = 0; i < sizeof gateway_help / sizeof gateway_help[0]; i++)
    if (strcmp(gateway_help[i].verb, verb) == 0)
      return gateway_help[i].text;
  return NULL;
}
