# help: the list of commands, then every command in full (generated from the command table).
help
help model
help data
help show
help ls
help drop
help train
help eval
help predict
help save
help load
help runs
help compare
help sql
help history
help replay
help export
help play
help expect
help world
help say
help pause
help clear
# clear, with no terminal to clear: nothing at all between the echoes
clear
help set
help version
help help
help quit
