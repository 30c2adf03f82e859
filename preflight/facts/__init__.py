"""What rules read: the table of facts and how each is read from a snapshot, the conditions rules and fix lines
require, derived facts, node-health and active-test judgements, GPU counter history, and collecting the probes
under one deadline into a snapshot."""
