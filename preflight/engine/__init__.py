"""The rule engine: reading rule files (rules, fixes, renamed and retired ids, workloads and GPUs) as data, the
comparisons, selection and --set, templates and placeholders, regex safety, and evaluating rules against facts."""
