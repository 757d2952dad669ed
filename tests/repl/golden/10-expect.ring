# expect: checks on the last result's numbers (what each command records: docs/repl.md), the messages of
# a check that fails, conditions refused with a caret, and play: the list, by number and name, settings
# put back after a tutorial. The tutorials here are tests/repl/golden/tutorials/ (run_golden.py).
expect params = 1
model m = mlp 784-32-10
expect params = 25450
expect params == 25450
expect params != 25451
expect layers >= 3
expect classes < 11
expect params ~= 25000 within 2%
expect params ~= 25000 within 500
expect bytes = 101800
# fails, each with what it read
expect params > 25450
expect params ~= 25000 within 1%
expect params = [25450, 1]
# malformed: a caret under the fault
expect
expect params
expect params => 3
expect params = [1, 2
expect params = [1 2]
expect params < 1,5
expect params > 2x
expect params ~= 25000
expect params = 3 within 1%
expect params = 3 apples
expect params per ranks = 3
expect rank x = 3
expect params ~= 25000 within -1%
expect params = 1e999
# unknown names list what the result has; ranks where there are none
expect parms = 3
expect rank 0 = [1, 2]
expect params per rank = 3
expect formula = 3
# say, help and expect itself leave the result alone
say "between a command and its checks"
expect params = 25450
data d = digits n=600
expect train = 600
expect test = 100
expect classes = 10
set threads=1 seed=1
train m on d epochs=1
expect steps = 10
expect epochs = 1
expect accuracy > 0.1
expect accuracy < 1
show m
expect params = 25450
eval m on d
expect samples = 100
expect accuracy >= 0
expect loss > 0
# play: the list, by number, by name, settings put back
play
help play
set seed=3
play 0 auto
set
expect params = 7890
play sizes auto
play 00-sizes.ring auto
play siezs
play 1 auto
set
play 7
