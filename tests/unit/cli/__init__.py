"""Unit tests of onward/cli/: the `onward` command's plug-ins, tenant commands, worker module and the
configuration a person types, refused at start."""
