"""Reading and checking what users give: corpus, cases and params, each problem at its file and line."""
