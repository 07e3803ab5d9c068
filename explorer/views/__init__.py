"""The browser-drawn views' shared parts: compact arrays sent once (browser_arrays) and the canvas views' values,
stamped against late answers (canvas_view)."""
