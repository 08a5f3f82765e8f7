"""What the bot learns from the web: learned documents and their keywords, the web search, and
the pruning of keywords nobody uses."""
