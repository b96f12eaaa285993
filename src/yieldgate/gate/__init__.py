"""The stage gate: a policy's stages and requirements (`policy`), the evidence read for a target (`evidence`), the
decision (`gate`), the data supply at each stage (`supply`), model sizing from a campaign's law (`sizing`) and
`yieldgate plan` (`plan`)."""
