"""Data types shared by every layer: configuration, jobs, events, session results; and
the formats two drivers share: the controller's API (`api`), recordings (`recording`),
the license pool's wire types (`license_api`), job-id lists for humans (`job_ids`); and
the lifecycles every driver changes states by (`lifecycle`: states, transition tables;
`causes`)."""
