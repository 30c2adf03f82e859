"""One module per output format: text, JSON, JUnit, Prometheus, NFD, node-problem-detector, Nagios, the fleet's
text and HTML, plans, diagnoses and rule references; formats.py is the registry every --format goes through."""
