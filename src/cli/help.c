/* The gateway verbs' own help texts (list, call, policy, cred, approvals, approve,
 * deny, audit, mcp, access): `capsule VERB --help` and `capsule help VERB` print one. A
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
     "                    [--session ID] [--thread ID] [--attach FILE]... [--artifacts DIR]\n"
     "                    [--approval-ttl S] [--json]\n"
     "                    CAPABILITY TOOL [JSON|-]\n"
     "\n"
     "One tool call through policy, approval, argument validation, credentials,\n"
     "the sandboxed run and the audit log; prints the tool's JSON result.\n"
     "The arguments default to {}; - reads them from stdin.\n"
     "\n"
     "      --caps DIR    the capabilities directory (default $CAPSULE_CAPS, else\n"
     "                    ./capabilities)\n"
     "      --user U      who calls (default the login name)\n"
     "      --timeout S   wall-clock limit in seconds (1..31536000)\n"
     "      --session ID  the session a Selu tool sees (session_id); a Selu capability\n"
     "                    has an instance and a /workspace per user and session\n"
     "      --thread ID   the conversation thread a Selu tool sees (thread_id)\n"
     "      --attach FILE upload FILE to a Selu capability (UploadInputArtifact) and\n"
     "                    add it to the arguments' \"attachments\" (at most 16)\n"
     "      --artifacts DIR  save the artifacts a Selu tool's result names\n"
     "                    (DownloadOutputArtifact) in DIR; the result gives each path\n"
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
              "       capsule audit export|verify --format covenant DIR [--state DIR]\n"
              "\n"
              "The audit log: one record per call (an interrupted one too), and one per\n"
              "policy, credential or approval change (decision: the kind of change);\n"
              "`verify` checks the hash chain and its head and names the first bad record.\n"
              "With --format covenant: `export` writes the log as Covenant's events.jsonl and\n"
              "events.chain.jsonl into DIR, `verify` checks such a pair (Covenant's too).\n"
              "\n"
              "      --json        an array of objects, one per record (with --follow:\n"
              "                    one object a line)\n"
              "      --since TIME  records from TIME on: RFC 3339 (2026-11-25T18:00:00Z,\n"
              "                    an offset, or a date) or back from now (30s, 10m, 2h, 1d)\n"
              "      --tail N      only the last N records (of those --since selects)\n"
              "      --follow      keep printing records as they are added; alone, it starts\n"
              "                    at the end (only new records)\n"
              "      --format covenant  export or verify in Covenant's format\n" GATEWAY_COMMON "\n"
              "exit status: 0 ok (verified), 1 failed or the chain is broken, 2 usage\n"},
    {"access", "usage: capsule access issue NAME [--operator] [--user U] [--state DIR]\n"
               "       capsule access list [--json] [--state DIR]\n"
               "       capsule access revoke NAME [--state DIR]\n"
               "\n"
               "Bearer tokens for `capsule serve`'s network front doors. `issue` prints a new\n"
               "random token once (the state keeps only its SHA-256); a call made with it is\n"
               "made as its user, and only an --operator token may approve calls or change\n"
               "policies. `list` shows name, user, operator, created (never a token); `revoke`\n"
               "removes one. Issuing and revoking are audited and refused inside a sandbox.\n"
               "\n"
               "      --operator    the token may act as the operator\n"
               "      --user U      the token's user (default the login name)\n"
               "      --json        list: an array of objects\n" GATEWAY_COMMON "\n"
               "exit status: 0 ok, 1 no such name or the name is taken, 2 usage,\n"
               "4 refused inside a sandbox or --user without the operator's rights\n"},
    {"mcp",
     "usage: capsule mcp [--caps DIR] [--state DIR] [--capability ID] [--user U] [--timeout S]\n"
     "\n"
     "An MCP server on stdin and stdout (newline-delimited JSON-RPC, revisions\n"
     "2025-06-18 and 2025-11-25): what an agent host launches. tools/list names\n"
     "every ready tool CAPABILITY__TOOL (blocked tools are not listed); tools/call\n"
     "goes through the same pipeline as `capsule call` (policy, validation,\n"
     "credentials, sandbox, audit), as the user who launched it. Policy ask is put\n"
     "to the user through the client's elicitation when it supports it, else it\n"
     "leaves a pending approval (`capsule approve`). Logs go to stderr.\n"
     "\n"
     "      --caps DIR    the capabilities directory (default $CAPSULE_CAPS, else\n"
     "                    ./capabilities)\n"
     "      --capability ID  serve this capability alone, its tools under their own names\n"
     "      --user U      who calls (default the login name; another user needs the\n"
     "                    operator's rights)\n"
     "      --timeout S   wall-clock limit of each call in seconds\n" GATEWAY_COMMON "\n"
     "exit status: 0 the client closed stdin, 1 the capabilities or the state cannot be\n"
     "read, 2 usage\n"},
};

const char *cli_gateway_help(const char *verb)
{
  for (size_t i = 0; i < sizeof gateway_help / sizeof gateway_help[0]; i++)
    if (strcmp(gateway_help[i].verb, verb) == 0)
      return gateway_help[i].text;
  return NULL;
}
