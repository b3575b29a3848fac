# Timed parts for the scripts of .ci/ (sourced, not run):
#   part NAME COMMAND [ARG ...]   runs COMMAND as the part NAME
#   parts_summary STATUS          the table of the parts' times (call it on EXIT)
# Each part prints its name and the clock (UTC) as it starts and its seconds as
# it ends. The table gives each part's wall time and the CPU time of the
# processes it ran (user and system, all cores): on a machine that others load,
# the CPU time is the number that compares.

_part_names=()
_part_wall=()
_part_cpu=()
_part_now=""
_part_times=$(mktemp)

# The CPU seconds of this shell's finished children, in _part_cpu_total.
# `times` runs in this shell: in a subshell it would count the subshell's alone.
_part_read_cpu() {
  times > "$_part_times"
  _part_cpu_total=$(awk 'NR == 2 {
    for (i = 1; i <= 2; i++) { split($i, t, "m"); n += t[1] * 60 + substr(t[2], 1, length(t[2]) - 1) }
    printf "%.0f", n }' "$_part_times")
}

part() {
  local name=$1 start=$SECONDS cpu_before
  shift
  _part_now=$name
  _part_read_cpu
  cpu_before=$_part_cpu_total
  echo "=== [$(date -u +%T)] $name"
  "$@"
  _part_read_cpu
  _part_names+=("$name")
  _part_wall+=($((SECONDS - start)))
  _part_cpu+=($((_part_cpu_total - cpu_before)))
  _part_now=""
  echo "=== [$(date -u +%T)] $name: $((SECONDS - start)) s"
}

parts_summary() {
  local status=$1 i
  echo
  printf '%-52s %8s %8s\n' "part" "wall s" "CPU s"
  for i in "${!_part_names[@]}"; do
    printf '%-52s %8d %8d\n' "${_part_names[$i]}" "${_part_wall[$i]}" "${_part_cpu[$i]}"
  done
  if [[ -n $_part_now ]]; then
    printf '%-52s %8s\n' "$_part_now" "FAILED"
  fi
  printf '%-52s %8d   (load average now: %s)\n' "total" "$SECONDS" \
    "$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null || echo unknown)"
  rm -f "$_part_times"
  if [[ $status -ne 0 ]]; then
    echo "FAILED (exit $status)"
  fi
}
