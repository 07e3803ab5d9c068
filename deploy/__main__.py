"""``python -m deploy --space owner/name [--dry-run]``: see ``deploy.space``."""
from deploy.space import main

raise SystemExit(main())
