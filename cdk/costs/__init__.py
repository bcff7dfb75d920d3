"""What a deploy costs while idle: the price table (with sources), the observability bill and the cost at rest."""
