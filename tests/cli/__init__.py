"""The command line: `absorb-prove` and its subcommands, hostile input, budgets."""
