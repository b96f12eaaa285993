"""Small helpers every layer may use: modules loaded on first use (`lazy`), files a user names as input (`inputs`)."""
