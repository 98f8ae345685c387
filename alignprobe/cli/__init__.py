"""The command line: thin click commands over library calls a notebook can make too."""
