import { familyBudget } from '../budget.js';

familyBudget('blind');
