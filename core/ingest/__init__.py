"""Documents in: finding them, reading them within limits, parsing them into anchored sections,
cutting passages and writing them to the index, one whole document at a time."""
