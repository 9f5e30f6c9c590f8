#!/usr/bin/env bash
# The hostile review's proofs of concept, as a suite: each attack that was
# found and fixed must stay blocked (exit 0; 77 when it cannot run here).
# Left out, and said so in docs: plant_capability.sh and
# manifest_file_source.sh (the operator trusts the capabilities directory
# and a manifest's credential routes), l7_rules_other_address.sh (rules
# bind a host's own addresses; docs/egress.md); of the second review's,
# abstract_squat_unrestricted.sh and state_bind_alias.sh (docs/sandbox.md).
# Usage: run.sh CAPSULE
set -u
capsule=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: the review's attacks run as root and as uid 65534"; exit 77; }
scripts=(
  notify_overflow.sh egress_log_symlink.sh state_rename_parent.sh plant_default_state.sh
  deny_rename_parent.sh writeonly_grant_readable.sh approval_digest_depth.sh
  covenant_log_fill.sh blocked_command_hardlink.sh talos_error_escape.sh
  egress_verbose_escape.sh dry_run_forged_grant.sh statedirs_tmp_dos.sh
  expand_scanned_state.sh seccomp_variants.sh pid1_survivors.sh
  connect_root_socket.sh expand_prompt_spoof.sh expand_queue_flood.sh
  workspace_bound_warning.sh rw_grant_root_socket.sh
  # the second review's (tests/review2/)
  ../review2/state_chmod_parent.sh ../review2/deny_chmod_parent.sh
  ../review2/plant_project_state_root.sh ../review2/socket_grant_symlink.sh
  ../review2/proxy_local_route.sh ../review2/approval_hidden_args.sh
  ../review2/call_result_terminal.sh
  # the third review's (tests/review3/)
  ../review3/config_redirect_caps.sh ../review3/config_foreign_owner_root.sh
  ../review3/stop_stale_pid.sh ../review3/egress_log_fifo.sh ../review3/id_range_per_state.sh
  # the fourth's (tests/review4/)
  ../review4/config_other_xdg.sh ../review4/stop_forged_status.sh
  ../review4/id_range_moved_state.sh
  # the fifth's (tests/review5/)
  ../review5/run_marker_fd_leak.sh ../review5/selu_cpu_budget_v1.sh
  ../review5/id_range_key_space.sh ../review5/id_range_long_line.sh
  ../review5/run_marker_own_lock.sh ../review5/run_audit_enospc.sh
  ../review5/id_range_refusal_command.sh ../review5/id_range_other_mount_ns.sh
  ../review5/cred_advice_command.sh ../review5/id_range_run_key.sh ../review5/id_range_same_id.sh
  # the sixth's (tests/review6/)
  ../review6/mcp_self_allow.sh ../review6/volume_bound_hidden.sh ../review6/deny_absent_created.sh
  ../review6/mcp_stderr_flood.sh ../review6/nono_profile_plant.sh ../review6/nono_profile_modes.sh
  ../review6/volume_quota.sh
  # the seventh's (tests/review7/)
  ../review7/ui_session_flood.sh ../review7/ui_hostile_row.sh ../review7/ui_probes.sh
  ../review7/ui_signin_flood.sh
  ../review7/ui_conn_hog.sh ../review7/ui_cookie_port.sh ../review7/mcp_conn_hog.sh
  ../review7/call_socket_forged.sh ../review7/call_socket_probes.sh ../review7/grpc_fds.sh
  ../review7/mcp_relay_notify.sh ../review7/pg_url_password.sh
  ../review7/state_null_row.sh ../review7/migrate_column_injection.sh
  ../review7/pg_hostile_meta.sh ../review7/state_url_ps.sh
  # the eighth's (tests/review8/)
  ../review8/package_watch_moved.sh ../review8/warm_connect_state_lock.sh
  ../review8/route_verdict_nat64.sh
  # the ninth's (tests/review9/)
  ../review9/unauth_worker_hog.sh ../review9/store_quota_race.sh
  ../review9/attach_flood.sh ../review9/selu_capture_orphans.sh
  ../review9/artifact_name_audit.sh ../review9/selu_long_id.sh
  ../review9/selu_error_audit_pg.sh ../review9/artifact_probes.sh
  ../review9/attach_memory.sh ../review9/audit_name_spoof.sh
  ../review9/egress_supervisor_probes.sh ../review9/artifact_stream_hog.sh
  # the tenth's (tests/review10/)
  ../review10/ready_clone_hang.sh ../review10/resume_probes.sh ../review10/ask_spent_flood.sh
  ../review10/replay_memory.sh ../review10/cancel_leaks.sh
  # the eleventh's (tests/review11/)
  ../review11/hold_probes.sh ../review11/ahead_probes.sh
  # the twelfth's (tests/review12/)
  ../review12/group_kill.sh ../review12/group_kill_pg.sh ../review12/keeper_flood.sh
  ../review12/fast_reload_uaf.sh ../review12/fast_cancel.sh
  # the thirteenth's (tests/review13/)
  ../review13/gather_capture.sh ../review13/gather_templates_memory.sh
  # the fourteenth's (tests/review14/)
  ../review14/grant_revoke_warm.sh ../review14/tool_reach.sh ../review14/warm_egress_hang.sh
  ../review14/warm_egress_lost.sh ../review14/warm_egress_stop.sh ../review14/warm_egress_serve_alone.sh
  # the fifteenth's (tests/review15/)
  ../review15/pending_v6_prefix.sh ../review15/pending_subuid.sh ../review15/warm_selu_kill.sh
  # the sixteenth's (tests/review16/)
  ../review16/spool_other_user.sh ../review16/unit_probes.sh
  # the seventeenth's (tests/review17/)
  ../review17/revoke_partial_warm.sh ../review17/revoke_starting_warm.sh
  ../review17/warm_egress_killed.sh ../review17/revoke_slow_starting_warm.sh
  ../review17/revoke_keeper_paused.sh
  # the nineteenth's (tests/review19/)
  ../review19/revoke_after_same_key_restart.sh ../review19/grant_while_starting_fails_call.sh
  ../review19/revoke_mcp_cold_fallback.sh ../review19/revoke_mcp_retired_keeper.sh
  ../review19/revoke_selu_dying_keeper.sh
)
pass=0 fail=0 skip=0
for s in "${scripts[@]}"; do
  # notify_overflow.sh detects the overflow in an ASan build (make test-asan
  # runs this suite with that build's capsule); elsewhere it checks the
  # connect is refused
  out=$(cd "$here/../.." && timeout 600 bash "$here/$s" "$capsule" 2>&1)
  case $? in
  0) pass=$((pass + 1)); printf '  ok   %s\n' "$s" ;;
  77) skip=$((skip + 1)); printf '  skip %s: %s\n' "$s" "$(echo "$out" | tail -1)" ;;
  *) fail=$((fail + 1)); printf '  FAIL %s\n' "$s"; echo "$out" | tail -5 | sed 's/^/         /' ;;
  esac
done
echo "review attacks: $pass blocked, $fail not blocked, $skip skipped"
[ "$fail" -eq 0 ]
