"""Small helpers every layer may use, each the one copy of its idea: content hashing (`hashing`) and NaN in JSON
(`jsonsafe`)."""
