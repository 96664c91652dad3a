# Shell helpers the bench/ scripts share; source it.

# wait_for COMMAND...: runs the command every half second until it succeeds,
# for up to ${WAIT_FOR_TRIES:-240} tries (two minutes by default).
wait_for() {
  for _ in $(seq "${WAIT_FOR_TRIES:-240}"); do
    if "$@" > /dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "timed out waiting for: $*" >&2
  return 1
}
