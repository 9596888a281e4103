"""uvicorn tuning: deadlines and caps for slow clients, request heads, coalesced writes."""
