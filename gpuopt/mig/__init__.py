"""Dynamic MIG layout: which MIG placements to allocate so waiting claims fit and few GPUs are cut."""
