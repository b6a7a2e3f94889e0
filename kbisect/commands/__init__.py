"""The command line: one module per subcommand (parser, then a typed spec for the engines)."""
