# Regenerate docs/results.md and docs/figures/ from experiments/all.yaml.
RACKWISE ?= rackwise

.PHONY: reproduce reproduce-quick
reproduce:
	$(RACKWISE) reproduce

reproduce-quick:
	$(RACKWISE) reproduce --quick
