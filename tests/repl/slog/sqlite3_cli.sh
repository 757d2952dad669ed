#!/usr/bin/env bash
# The session log is an ordinary SQLite file: the real sqlite3 shell reads what slog-fill wrote.
# Usage: sqlite3_cli.sh PATH/TO/slog-fill [PATH/TO/sqlite3]; skipped (77) without sqlite3.
set -u
fill=$1
sqlite=${2:-}
if [ -z "$sqlite" ] || [ ! -x "$sqlite" ]; then
    echo "SKIP: no sqlite3 shell (apt-get install sqlite3)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/sessions.db
fails=0
check() { # check WHAT GOT WANT
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: got '$2', want '$3'"; fails=$((fails + 1)); fi
}
q() { "$sqlite" -readonly "$db" "$1" 2>&1; }

"$fill" "$db" "$tmp/model.bin" || { echo "FAIL slog-fill"; exit 1; }

check "schema version" "$(q 'PRAGMA user_version')" 1
check "WAL" "$(q 'PRAGMA journal_mode')" wal
check "session closed" "$(q 'SELECT status, argv FROM sessions')" "closed|slog-fill"
check "commands in order" "$(q "SELECT group_concat(seq || ' ' || status || ' ' || text, '; ') FROM commands")" \
    "1 error trian m on d; 2 ok train m on d epochs=1"
check "error message kept" "$(q 'SELECT error FROM commands WHERE seq = 1')" \
    "unknown command 'trian' (did you mean 'train'?)"
check "run" "$(q "SELECT kind, model, dataset, status, steps, json_extract(options, '\$.epochs'),
    json_extract(final, '\$.test_acc') FROM runs")" "train|m|d|done|100|1|0.97"
check "metrics" "$(q "SELECT name, count(*), min(step), max(step) FROM metrics GROUP BY name ORDER BY name")" \
    "acc|100|0|99
loss|100|0|99"
check "loss at step 3" "$(q "SELECT value FROM metrics WHERE name = 'loss' AND step = 3")" 0.25
check "times are unix seconds" "$(q "SELECT count(*) FROM metrics WHERE datetime(t, 'unixepoch') > '2020'")" 200
check "run linked to its command" "$(q 'SELECT c.text FROM runs r JOIN commands c ON c.id = r.command_id')" \
    "train m on d epochs=1"
check "artifact" "$(q "SELECT kind, bytes, path FROM artifacts")" "checkpoint|100000|$(readlink -f "$tmp/model.bin")"
if command -v sha256sum >/dev/null; then
    check "artifact sha256 = sha256sum" "$(q 'SELECT sha256 FROM artifacts')" \
        "$(sha256sum "$tmp/model.bin" | cut -d' ' -f1)"
fi
check "schema documents its columns" "$("$sqlite" -readonly "$db" .schema | grep -c 'unix seconds')" 1
check "foreign keys hold" "$(q 'PRAGMA foreign_key_check')" ""
check "integrity" "$(q 'PRAGMA integrity_check')" ok
echo "sqlite3-cli: $fails failed"
[ "$fails" -eq 0 ]
