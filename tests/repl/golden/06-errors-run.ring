# Errors found while running a command: missing files, values out of range, the session log's
# rules. Run with --keep-going; nothing here changes the session.
set threads=1
model m = mlp 784-32-10
data d = digits n=600
train m on d steps=2 eval=off

# Files that are not there.
load m nosuch.safetensors
play nodir/nosuch.ring

# A model that does not fit the data.
model wide = mlp 100-32-10
train wide on d
model few = mlp 784-32-3
eval few on d

# Loading weights into a model of another shape.
save m m.safetensors
model other = mlp 784-16-10
load other m.safetensors

# Values out of range.
train m on d epochs=0
train m on d batch=0
train m on d lr=-1
predict m on d n=99
set threads=0
set seed=-1

# The session log: read-only SQL, runs and sessions that do not exist, replaying this session.
sql "delete from runs"
sql "drop table runs"
sql "insert into runs(kind) values ('x')"
sql "selec 1"
sql "select nosuch from runs"
show run 999
show run
compare 1 999
export session 99 out.ring
replay 99
replay 1

# A lesson that stops at its own error.
play broken-lesson.ring
play lesson.ring fast

# help for a command that does not exist.
help trian
help nosuchthing

# The registry of training strategies: an unknown mode, an option of another mode, a value out of
# the mode's declared range: each refused before any rank starts, never replaced by another mode.
train m on d mode=pipelin
train m on d mode=ddp zero=2
train m on d mode=fsdp zero=5
train m on d mode=single bucket=8K
train m on d mode=ddp micro=4
train m on d mode=pipeline ranks=2 schedule=naive micro=4
train m on d mode=pipeline ranks=2 schedule=interleaved micro=3
train m on d mode=pipeline ranks=2 split=1,2
train m on d mode=pipeline ranks=4 accum=2
