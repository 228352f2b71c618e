"""Everything that makes the job run on one laptop: emulators, producer, run."""
