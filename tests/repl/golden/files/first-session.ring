# The session the export and replay scripts look back at (session 1 of their log).
set threads=1
model a = seq flatten linear(10)
data d = digits n=600
trian a on d
train a on d steps=3
runs
