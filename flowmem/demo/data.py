"""Invented vocabulary the simulated world and its tasks are drawn from.

All names, companies and subjects are made up for flowmem; `.test` domains never resolve.
"""

from __future__ import annotations

__all__ = [
    "BOARDS",
    "BOARD_TITLES",
    "CANCEL_MESSAGES",
    "COMPANIES",
    "EMAIL_BODIES",
    "EMAIL_SUBJECTS",
    "EVENT_TITLES",
    "FIRST_NAMES",
    "HOME_COMPANY",
    "HOME_DOMAIN",
    "LAST_NAMES",
    "MEETING_TITLES",
    "NEW_SUBJECTS",
    "NEW_TASK_TITLES",
    "PARTNERS",
    "REPLY_MESSAGES",
    "WELCOME_MESSAGES",
]

HOME_COMPANY = "Hollowbrook"
HOME_DOMAIN = "hollowbrook.test"

FIRST_NAMES = (
    "Olga", "Tomasz", "Amara", "Kenji", "Lucia", "Ravi", "Ingrid", "Mateo", "Soraya", "Felix",
    "Nadia", "Bruno", "Yara", "Elio", "Mirela", "Dario", "Hana", "Jonas", "Leila", "Oskar",
    "Priya", "Anselm", "Tove", "Kwame", "Rosalind", "Idris", "Maren", "Teodor", "Zofia", "Cyrus",
)  # fmt: skip

LAST_NAMES = (
    "Petrova", "Lindqvist", "Okafor", "Brennan", "Castell", "Moreau", "Varga", "Halloran",
    "Sato", "Ferreira", "Novak", "Achterberg", "Quennell", "Dumitru", "Rask", "Ibarra",
    "Whitlow", "Kasprzak", "Ndiaye", "Ostrander", "Belcourt", "Tamsin", "Oyelaran", "Fairbank",
    "Holmgren", "Vasquez", "Marchetti", "Eriksen", "Abernathy", "Solberg",
)  # fmt: skip

PARTNERS = (
    ("Quillstone Analytics", "quillstone.test"),
    ("Brambleway Foods", "brambleway.test"),
    ("Tidewater Robotics", "tidewater.test"),
    ("Copperleaf Studios", "copperleaf.test"),
    ("Halcyon Freight", "halcyonfreight.test"),
    ("Larkspur Health", "larkspur.test"),
)
"""External companies the user corresponds with: (name, email domain)."""

COMPANIES = (
    "Ironbark Mills", "Saltmarsh Energy", "Vellum & Vine", "Pinecrest Labs", "Marigold Transit",
    "Glasswing Media", "Emberly Textiles", "Kestrel Optics", "Dunmore Bakeries", "Silverfen Bank",
    "Orchard Loop", "Gannet Logistics", "Thistledown Farms", "Riverglass Software",
    "Cobalt Harbor", "Wrenfield Clinics", "Lanternworks", "Mosswood Supply",
)  # fmt: skip
"""Companies CRM customers work for."""

EMAIL_SUBJECTS = (
    "Q2 budget draft", "Offsite logistics", "Vendor contract renewal",
    "Website redesign feedback", "Spring hiring plan", "Server migration window",
    "Quarterly board deck", "Travel reimbursement policy", "Customer survey results",
    "Warehouse inventory count", "Brand guidelines update", "Security audit findings",
)  # fmt: skip
"""Subjects of mailbox threads; no subject is a substring of another (search is by substring)."""

EMAIL_BODIES = (
    "Hi, attaching the latest version of the {topic}. Let me know what you think.",
    "Quick follow-up on the {topic}: I added the numbers we discussed on Thursday.",
    "Here is where we are with the {topic}. Two open questions remain, see below.",
    "Sharing my notes on the {topic} before our next sync. - {first}",
    "Can you take a look at the {topic} by end of week? Thanks, {first}",
    "Small correction to the {topic}: the dates in section 2 moved by a week.",
)  # fmt: skip

EVENT_TITLES = (
    "Design review", "Weekly sync", "Budget check-in", "Roadmap planning", "Vendor call",
    "Sprint retro", "Customer demo", "Hiring panel", "Pricing workshop", "Ops standup",
)  # fmt: skip

BOARDS = ("Launch", "Hiring", "Operations", "Design")

BOARD_TITLES = (
    "Update onboarding doc", "Review Q2 metrics", "Order new badges", "Draft launch post",
    "Fix staging login", "Plan team lunch", "Audit vendor list", "Refresh pitch deck",
    "Archive old tickets", "Collect headshots",
)  # fmt: skip
"""Titles of existing board tasks; the same title may sit on several boards."""

NEW_TASK_TITLES = (
    "Prepare the vendor shortlist", "Write the launch FAQ", "Book the offsite venue",
    "Collect interview feedback", "Update the pricing sheet", "Draft the press kit",
    "Clean up the shared drive", "Renew the design tool licenses",
)  # fmt: skip

MEETING_TITLES = (
    "Budget deep dive", "Pitch rehearsal", "Quarterly planning", "Onboarding walkthrough",
    "Vendor shortlist review", "Hiring debrief", "Launch go/no-go",
)  # fmt: skip

NEW_SUBJECTS = (
    "Lunch and learn next week", "Updated travel checklist", "Draft agenda for Thursday",
    "Feedback on the pitch", "Parking at the new office", "Holiday coverage",
)  # fmt: skip

REPLY_MESSAGES = (
    "Thanks, I will review it by Friday.",
    "Can we move this to next week?",
    "Looks good to me, please go ahead.",
    "I have shared the updated numbers in the team folder.",
    "Let's discuss this at our next sync.",
)

WELCOME_MESSAGES = (
    "Welcome aboard, happy to have you as our customer.",
    "Great news, the contract is signed. Please set up the kickoff call.",
    "They signed today. Please reach out this week to plan onboarding.",
)

CANCEL_MESSAGES = (
    "Sorry, something urgent came up. Let's find a new slot.",
    "I have to cancel our meeting; I will send a new invite soon.",
    "Apologies for the short notice, can we reschedule?",
)
