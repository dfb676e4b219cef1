"""The domain: what orchmem knows and the rules it applies, one package per feature;
``storage/`` is the only code that runs SQL."""
