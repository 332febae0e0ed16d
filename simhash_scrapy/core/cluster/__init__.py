"""The clustering rule and what it compares: templates, sentence containment, representatives, protected text."""
