"""Example questions and contexts for the QA tab (the long one needs several doc_stride windows)."""
from __future__ import annotations

SHORT_CONTEXT = "Jim Henson was a nice puppet."

PUFFINS = (
    "Atlantic puffins spend most of the year far out at sea. In spring they return to rocky islands in "
    "the North Atlantic, where they nest in burrows dug into the grassy tops of sea cliffs. Each pair "
    "raises a single chick, which is called a puffling."
)

# A made-up town, so that every answer comes from the text and not from what a model may remember.
ELDMOUTH = """\
Eldmouth is a small harbour town on the northern coast, built where the river Eld meets the sea. For most \
of its history it lived from fishing, and the old quarter near the water still has the narrow lanes, \
stone cottages and net lofts of a fishing village. The first houses were built by families who came \
down from the hill farms in search of work, and the town grew slowly around a single quay. Today about \
nine thousand people live there, and in summer the population almost doubles when visitors arrive for \
the beaches, the boat trips and the long cliff walk to the headland.

The harbour was never an easy one. A sand bar lies across the mouth of the river, and at low tide the \
channel over it is only a few feet deep. Storms from the north-east push heavy swells against the bar, \
and in the eighteenth century many boats were lost while trying to enter the harbour at night. The \
parish records list the names of more than forty fishermen who drowned within sight of their own homes. \
After a winter in which three boats sank on the same evening, the townspeople began to collect money \
for a light that would guide crews safely over the bar.

It took them many years. The fishermen paid a penny for every basket of fish they landed, the two inns \
held an auction every autumn, and a merchant named Thomas Harrow, who had made his fortune shipping \
timber, promised to pay for the stone. Work on the lighthouse at Gull Point began in 1791 under the \
engineer Margaret Lyle, one of the very few women of her time to direct such a project. The tower was \
built from granite quarried on the headland itself and carried up the cliff path on the backs of \
ponies. The lighthouse on Gull Point was finished in 1796, and its lamp was lit for the first time on \
the first night of December that year. At first the light came from twelve oil lamps set in front of \
polished copper reflectors; a large glass lens replaced them in 1851.

For more than a century the light was kept by the Penrose family. Three generations of keepers lived \
in the small cottage at the foot of the tower, trimming the wicks, polishing the lens and winding the \
clockwork that turned it through the night. The last keeper, Alice Penrose, kept a diary that is now \
held in the town museum; it records every ship she saw pass, every storm, and the night in 1893 when \
she rowed out alone to rescue the crew of a stranded coal barge. The light was converted to electricity \
in 1932 and has been fully automatic since 1979, when the last keeper's cottage was turned into a small \
museum about the history of the harbour.

The railway reached Eldmouth in 1862, and with it came the first holiday visitors. Hotels were built \
along the sea front, and the fish market moved to a new hall beside the station so that catches could \
be sent inland on the morning train. The fishing fleet was at its largest around 1900, with more than \
sixty boats, but it shrank steadily during the twentieth century as the fish stocks declined. Only a \
handful of boats still work from the quay, most of them catching crabs and lobsters in pots set close \
to the shore.

Visitors today usually start at the harbour, where the old fish market has become a covered market for \
local food and crafts. From there the cliff path climbs past the lifeboat station to Gull Point, where \
the lighthouse still stands. On clear evenings people gather on the grass beside the tower to watch the \
sun go down over the water, and on the first night of December the town still holds a lantern procession \
along the cliff to remember the night the light was first lit. The museum in the keeper's cottage is open \
every day from Easter to the end of October, and entry is free for children.
"""

EXAMPLES: list[list[str]] = [
    ["Who was Jim Henson?", SHORT_CONTEXT],
    ["Where do puffins nest?", PUFFINS],
    ["When was the lighthouse on Gull Point finished?", ELDMOUTH],
]
