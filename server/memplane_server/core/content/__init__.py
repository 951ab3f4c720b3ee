"""The write-time content policy: detectors of secrets and personal data, and what a policy does with their findings."""
