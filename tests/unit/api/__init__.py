"""Unit tests of onward/api/: the resolver's routes, the credential's principal and claims, and the API's
guards in the template."""
