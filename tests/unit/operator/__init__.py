"""Unit tests of onward/operator/: explain, lag, due age, bulk actions and the reads behind the status page's
operator view."""
