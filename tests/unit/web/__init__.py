"""Unit tests of onward/web/: the status page's forms, which never put what they hold in a URL."""
