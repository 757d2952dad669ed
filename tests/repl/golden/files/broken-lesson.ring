say "This lesson has a typo on its next line, so it stops there."
shwo tiny
say "This line is never reached."
