"""stdio backends: the supervised child process, its pipes and lines, its era, its listen requests."""
