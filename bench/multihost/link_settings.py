"""The link setting of a shaped_links_bench result line, and its name in tables: one definition
for scaling_model.py and summarize.py."""


def setting(row):
    """A row's link setting: (rate Mbit/s, one-way latency us, loss); older files have rate only."""
    return (row["link_mbit"], row.get("link_latency_us", 0), row.get("link_loss", 0.0))


def describe(key):
    """"1000 Mbit/s, 500 us, loss 0.001"; rate 0 is "no rate limit"."""
    rate, latency, loss = key
    text = f"{rate} Mbit/s" if rate else "no rate limit"
    if latency:
        text += f", {latency} us"
    if loss:
        text += f", loss {loss:g}"
    return text
