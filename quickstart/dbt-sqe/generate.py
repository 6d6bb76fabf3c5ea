"""The jaffle shop's raw data, the same on every run (no randomness but a fixed-seed generator of
our own, stdlib only).

    python generate.py 1 seeds/    the shop as of day 1 (2025-04-01)
    python generate.py 2 seeds/    the same shop a day later: new orders (and their payments), a
                                   new customer, two orders whose status moved on and a customer
                                   whose email changed

Each run writes raw_customers.csv, raw_orders.csv and raw_payments.csv into the directory given,
whole: dbt's seeds load them again, and the models see the day's state.
"""

import csv
import datetime
import sys
from pathlib import Path

FIRST = ["Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kemal", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tala"]
LAST = ["Abara", "Berg", "Castro", "Duval", "Eriksen", "Fontaine", "Gallo", "Horvat", "Ivanova",
        "Jensen", "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quispe",
        "Rossi", "Sato", "Tanaka"]
METHODS = ["credit_card", "credit_card", "credit_card", "bank_transfer", "coupon", "gift_card"]

START = datetime.date(2025, 1, 1)
DAY1 = datetime.datetime(2025, 4, 1, 0, 0, 0)
DAY2 = datetime.datetime(2025, 4, 2, 0, 0, 0)
CUSTOMERS = 40
ORDERS = 100


class Numbers:
    """A linear congruential generator (the constants of Numerical Recipes): the same numbers
    on every machine and every Python."""

    def __init__(self, seed):
        self.state = seed

    def below(self, n):
        self.state = (1664525 * self.state + 1013904223) % 2**32
        return (self.state >> 8) % n


def stamp(t):
    return t.strftime("%Y-%m-%d %H:%M:%S")


def day_one():
    n = Numbers(20250401)
    customers = []
    for i in range(1, CUSTOMERS + 1):
        first, last = FIRST[n.below(len(FIRST))], LAST[n.below(len(LAST))]
        email = f"{first.lower()}.{last.lower()}{i}@example.com"
        joined = datetime.datetime.combine(START, datetime.time(8)) + datetime.timedelta(hours=2 * i)
        customers.append({"id": i, "first_name": first, "last_name": last, "email": email,
                          "updated_at": stamp(joined)})
    orders, payments = [], []
    for i in range(1, ORDERS + 1):
        # Ordered over the first quarter, about one a day; the older an order, the further along.
        ordered = START + datetime.timedelta(days=(i * 89) // ORDERS)
        age = (DAY1.date() - ordered).days
        if age > 30:
            status = ["completed"] * 8 + ["returned", "return_pending"]
            status = status[n.below(len(status))]
        elif age > 7:
            status = ["shipped", "completed", "completed"][n.below(3)]
        else:
            status = ["placed", "shipped"][n.below(2)]
        changed = datetime.datetime.combine(ordered, datetime.time(9)) + datetime.timedelta(
            days=min(age - 1, 2 + n.below(5)), minutes=n.below(600))
        orders.append({"id": i, "customer_id": 1 + n.below(CUSTOMERS), "order_date": ordered.isoformat(),
                       "status": status, "updated_at": stamp(changed)})
    for order in orders:
        for _ in range(1 + (n.below(4) == 0)):
            payments.append({"id": len(payments) + 1, "order_id": order["id"],
                             "payment_method": METHODS[n.below(len(METHODS))],
                             "amount": 100 * (1 + n.below(30)) + 25 * n.below(4)})
    return customers, orders, payments


def day_two():
    customers, orders, payments = day_one()
    # A customer changed her email.
    c = customers[6]
    c["email"] = f"{c['first_name'].lower()}.{c['last_name'].lower()}@mail.example.org"
    c["updated_at"] = stamp(DAY2 + datetime.timedelta(hours=9, minutes=15))
    # A new customer.
    customers.append({"id": CUSTOMERS + 1, "first_name": "Uma", "last_name": "Vidal",
                      "email": "uma.vidal41@example.com",
                      "updated_at": stamp(DAY2 + datetime.timedelta(hours=8))})
    # Two orders moved on: the last one placed was shipped, a completed one is being returned.
    placed = [o for o in orders if o["status"] == "placed"][-1]
    placed["status"] = "shipped"
    placed["updated_at"] = stamp(DAY2 + datetime.timedelta(hours=10))
    completed = [o for o in orders if o["status"] == "completed"][0]
    completed["status"] = "return_pending"
    completed["updated_at"] = stamp(DAY2 + datetime.timedelta(hours=11, minutes=30))
    # The day's new orders, the last of them from the new customer, each paid in one go.
    n = Numbers(20250402)
    for k in range(8):
        customer = CUSTOMERS + 1 if k == 7 else 1 + n.below(CUSTOMERS)
        order_id = ORDERS + 1 + k
        orders.append({"id": order_id, "customer_id": customer, "order_date": DAY2.date().isoformat(),
                       "status": "placed",
                       "updated_at": stamp(DAY2 + datetime.timedelta(hours=12, minutes=20 * k))})
        payments.append({"id": len(payments) + 1, "order_id": order_id,
                         "payment_method": METHODS[n.below(len(METHODS))],
                         "amount": 100 * (1 + n.below(30)) + 25 * n.below(4)})
    return customers, orders, payments


def write(path, rows):
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        out.writeheader()
        out.writerows(rows)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("1", "2"):
        sys.exit("usage: generate.py 1|2 OUT_DIR")
    customers, orders, payments = day_one() if sys.argv[1] == "1" else day_two()
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    write(out / "raw_customers.csv", customers)
    write(out / "raw_orders.csv", orders)
    write(out / "raw_payments.csv", payments)


if __name__ == "__main__":
    main()
