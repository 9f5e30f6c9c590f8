# bash completion for capsule (installed by `make install` into
# $(PREFIX)/share/bash-completion/completions/capsule). Verbs, each verb's
# options and sub-verbs, option values, and file names where a path goes.
_capsule() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion || return
  else
    cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
  fi
  local verbs="check show validate run doctor list call policy cred approvals approve deny audit ps stop dispatch token budget workspace image mcp access serve rollback export config grant revoke triggers events plugin state help"
  local common="--caps --state --json --help"
  local verb="" i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
    --) [ "$verb" = run ] && { COMPREPLY=($(compgen -c -- "$cur")); return; } ;;
    --caps | --state) ((i++)) ;;
    -*) ;;
    *) verb=${words[i]}; break ;;
    esac
  done
  # an option's value
  case $prev in
  --caps | --state | --allow-read | --allow-write | --allow-rw | --deny | --workdir)
    COMPREPLY=($(compgen -d -- "$cur")); [ "$prev" = --deny ] && COMPREPLY+=($(compgen -f -- "$cur")); return ;;
  --read | --write | --rw) COMPREPLY=($(compgen -d -- "$cur")); return ;;
  --host | --call) return ;;
  --config | --profile | --egress-log | --schema | --issuer | --netns)
    COMPREPLY=($(compgen -f -- "$cur")); return ;;
  --net) COMPREPLY=($(compgen -W "blocked proxy unrestricted" -- "$cur")); return ;;
  --scope) [ "$verb" = token ] && return; COMPREPLY=($(compgen -W "system user" -- "$cur")); return ;;
  --priority) COMPREPLY=($(compgen -W "low normal high" -- "$cur")); return ;;
  --format) COMPREPLY=($(compgen -W "covenant" -- "$cur")); return ;;
  --agent | --parent | --expires) return ;;
  --memory) COMPREPLY=($(compgen -W "256M 512M 1G 2G" -- "$cur")); return ;;
  --allow-host | --allow-port | --pids | --cpu-ms | --timeout | --approval-timeout | --env | --user | --session | --thread | --ref | --approval-ttl | --wait-approval | --to) return ;;
  --attach) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  --artifacts) COMPREPLY=($(compgen -d -- "$cur")); return ;;
  esac
  if [ -z "$verb" ]; then
    COMPREPLY=($(compgen -W "$verbs --help --version $common" -- "$cur"))
    return
  fi
  local opts="" subs="" files=""
  case $verb in
  check) opts="--quiet --strict --help" files=1 ;;
  show) opts="--compact --profile --state --help" files=1 ;;
  validate) opts="--schema --ref --json --first --format-assert --help" files=1 ;;
  run) opts="--config --profile --allow-read --allow-write --allow-rw --deny --net --allow-host --allow-port
             --memory --pids --cpu-ms --timeout --approval-timeout --workdir --env --dry-run --json --tty
             --proxy-allow-private --resolve --egress-log --state --verbose --help" ;;
  doctor) opts="--help" ;;
  list) opts="--caps --state --user --json --help" ;;
  call) opts="--caps --state --user --timeout --session --thread --attach --artifacts --approval-ttl
              --wait-approval --json --help" ;;
  policy) opts="--caps --state --user --force --json --help" subs="set rm list" ;;
  cred) opts="--state --user --scope --shared --json --help" subs="set list rm" ;;
  config) opts="--caps --state --user --json --help" subs="set list rm" ;;
  grant) opts="--state --host --read --write --rw --json --help" subs="list" ;;
  revoke) opts="--state --host --read --write --rw --help" ;;
  triggers) opts="--caps --state --user --timeout --call --param --help" subs="poll enable disable on run" ;;
  events) opts="--state --follow --json --help" ;;
  plugin) opts="--help" subs="install" ;;
  state) opts="--from --to --help" subs="migrate" ;;
  approvals) opts="--state --json --help" ;;
  approve | deny) opts="--state --help" ;;
  audit) opts="--state --json --since --tail --follow --format --help" subs="verify export" ;;
  ps) opts="--state --json --help" ;;
  stop) opts="--state --help" ;;
  dispatch) opts="--agent --issuer --priority --parent --caps --state --timeout --user --json --help" ;;
  token) opts="--state --scope --expires --json --help" subs="key keygen issue import revoke list trust" ;;
  budget) opts="--caps --state --json --help" subs="show set" ;;
  workspace) opts="--state --user --cache --json --help" subs="ls rm" ;;
  rollback) opts="list show diff restore verify prune --json --keep --state --help" ;;
  image) opts="--state --tag --json --help" subs="import pull ls inspect rm" files=1 ;;
  export) opts="--caps --state --netns --help" subs="oci" ;;
  mcp) opts="--caps --state --capability --user --timeout --help" ;;
  serve) opts="--caps --state --socket --mcp-http --grpc --capability --tls-cert --tls-key --insecure --timeout --rate --json --help" subs="status" ;;
  access) opts="--state --operator --user --json --help" subs="issue list revoke" ;;
  help) COMPREPLY=($(compgen -W "$verbs" -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  # the sub-verb, wherever the options put it
  if [ -n "$subs" ]; then
    local have=""
    for ((i = i + 1; i < cword; i++)); do
      case ${words[i]} in --state | --user | --scope) ((i++)) ;; -*) ;; *) have=1 ;; esac
    done
    [ -z "$have" ] && { COMPREPLY=($(compgen -W "$subs" -- "$cur")); return; }
  fi
  [ -n "$files" ] && COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _capsule capsule
