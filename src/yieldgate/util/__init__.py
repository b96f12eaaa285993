"""Small helpers every layer may use, each the one copy of its idea: modules loaded on first use (`lazy`), files a
user names as input (`inputs`), content hashing (`hashing`) and NaN in JSON (`jsonsafe`)."""
