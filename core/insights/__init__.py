"""What the answer log says: the report of what the bot answered, missed and stood on."""
