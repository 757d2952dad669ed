# Shared by the bench scripts (sourced after they cd to the repository root).
# bench_help: prints the script's header comment, its --help.
bench_help() { sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }

# bench_build TARGET...: configures $build (release) when it has no build.ninja, then builds the
# targets; sets exe to the REPL. Returns non-zero when either step fails.
bench_build() {
    [ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null || return 1
    ninja -C "$build" "$@" >/dev/null || return 1
    exe=$build/repl/ringside
}

# quiet: waits up to $wait_s seconds for the CPUs to go idle (less than 20 ticks busy in a second,
# interrupts included), so a figure is not someone else's build; says so on stderr when they do not.
quiet() {
    local deadline=$((SECONDS + wait_s))
    while [ $SECONDS -lt $deadline ]; do
        read -r _ u1 n1 s1 _ _ q1 sq1 _ < /proc/stat
        sleep 1
        read -r _ u2 n2 s2 _ _ q2 sq2 _ < /proc/stat
        [ $(( (u2 + n2 + s2 + q2 + sq2) - (u1 + n1 + s1 + q1 + sq1) )) -lt 20 ] && return 0
    done
    echo "# (the CPUs were still busy after ${wait_s}s; figures may be low)" >&2
}
