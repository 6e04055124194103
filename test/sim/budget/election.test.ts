import { familyBudget } from '../budget.js';

familyBudget('election');
