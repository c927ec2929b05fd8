"""rnic.host.apps: applications on the RNIC: rping (:mod:`.rping`), perftest
(:mod:`.perftest`), the end-to-end demo (:mod:`.demo`, :mod:`.demo_model`)."""
